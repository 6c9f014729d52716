"""The pages that span several packages: the drop list, a drop's page, the legal pages, the errors.

A drop's page shows its seat picker or variant picker (storefront/selectors.py), or the buyer's
hold; the template tags over core.formatting say money, durations and counts one way. Buyer
pages' words are all inside translation tags (tests/storefront/test_i18n.py). While PostgreSQL
cannot answer, `views.server_error` answers 503 with Retry-After and a page that asks again by
itself; any other exception is still the 500 page (tests/storefront/test_database_away.py).
"""
