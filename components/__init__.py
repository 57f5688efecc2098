"""Components of the example: the visual-defect classifier."""
