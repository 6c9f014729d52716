"""`shop.settings`: the settings' public name (DESIGN §11), kept for outside tools; they live in config."""

from config.settings import *  # noqa: F403
