"""Drops read with their stock, and drops, buyers and API tokens created.

Reads (catalogue/selectors.py): a drop with what is left, the storefront's cards and drop list,
`variant_of` (the variant a request names). A rehearsal's copy is hidden from them (and from
`GET /api/drops/<slug>`); `check_audience` refuses a rehearsal's account.

Writes (catalogue/services.py): `create_drop` is the one place a drop and its stock are made (the
admin's add goes through it, with its variants inline's rows); `check_variants` makes its checks,
which the admin's variants inline uses so a bad row is a form error and nothing is written;
`change_variants` replaces a drop's set of variants under the lock `relayout_stock` takes;
`change_drop` is the admin's one call for a changed drop (its columns, layout, quantities, variants
and prices). Both run in the caller's transaction when there is one, so the admin's save and a
stock change the services refuse roll back together and the form shows why. A drop
made without variants has one, named "", and nobody picks. API tokens: one ApiToken per buyer,
its SHA-256 only. The create_buyers and seed_demo commands live here.
"""
