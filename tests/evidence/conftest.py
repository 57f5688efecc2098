from store_urls import store_url  # noqa: F401  (the fixture, shared with the executor tests)
