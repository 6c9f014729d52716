from django.apps import AppConfig


class SaleConfig(AppConfig):
    """A buyer's way through a sale: the reserve steps both doors take, the claim lane, and
    returned units offered to the line (no models of its own)."""

    name = "sale"
