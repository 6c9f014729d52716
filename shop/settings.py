"""`shop.settings`: the settings' public name (docs/API.md), kept for outside tools; they live in config."""

from config.settings import *  # noqa: F403
