from django.apps import AppConfig


class CatalogueConfig(AppConfig):
    """What is on sale and how much of it is left: drops read with their stock, and the
    merchant's services that make a drop and its stock together (no models of its own)."""

    name = "catalogue"
