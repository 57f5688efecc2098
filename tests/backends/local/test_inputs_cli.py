"""Parsing --input/--param on the command line: one clear message for each mistake."""
import pytest

from mlpipe.backends.local.inputs import split_assignments
from mlpipe.errors import UsageError


def test_a_name_given_twice_is_refused():
    with pytest.raises(UsageError, match=r"--param epochs is given twice\n"
                                         r"  help: give --param epochs=... once"):
        split_assignments(["epochs=3", "epochs=4"], "--param")


def test_pairs_are_split_at_the_first_equals_sign():
    assert split_assignments(["a=1", "b=x=y"], "--param") == {"a": "1", "b": "x=y"}


def test_a_number_that_does_not_parse_says_so():
    from mlpipe.backends.local.inputs import resolve
    from pipelines.defect_classifier import defect_classifier

    with pytest.raises(UsageError, match=r"--param epochs=3.5: '3.5' is not an int\n"):
        resolve(defect_classifier.spec, {}, {"epochs": "3.5"})
