"""Product pictures as they are kept: JPEG, PNG or WebP only, recognised by their content (not
their name), decoded and encoded again so nothing but the pixels is stored (no metadata, no
trailing payload), under a name whose extension says the type they are served with."""

from __future__ import annotations

import io
import warnings
from pathlib import PurePath

from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.utils.text import slugify
from PIL import Image, UnidentifiedImageError

from core.errors import InvalidInput

MAX_BYTES = 5 * 1024 * 1024
MAX_PIXELS = 40_000_000  # 8K by 5K: past this a small file may still be a decompression bomb
EXTENSIONS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}  # Pillow's format -> the stored name's
SERVED = tuple(f".{ext}" for ext in (*EXTENSIONS.values(), "jpeg"))  # what /media/ serves at all


def cleaned(upload: UploadedFile[bytes]) -> ContentFile[bytes]:
    """The picture re-encoded in its own format; InvalidInput says what to upload instead."""
    if upload.size is not None and upload.size > MAX_BYTES:
        raise InvalidInput("The picture is larger than 5 MB; save a smaller one.")
    upload.seek(0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(upload, formats=list(EXTENSIONS)) as picture:
                kind = str(picture.format)
                if picture.width * picture.height > MAX_PIXELS:
                    raise InvalidInput("The picture has more than 40 million pixels; save a smaller one.")
                picture.load()
                encoded: Image.Image = picture
                if kind == "JPEG" and picture.mode not in ("RGB", "L"):
                    encoded = picture.convert("RGB")
                out = io.BytesIO()
                encoded.save(out, format=kind)  # no exif= or icc_profile=: the metadata stays behind
    except (UnidentifiedImageError, Image.DecompressionBombWarning, Image.DecompressionBombError, OSError):
        raise InvalidInput("This file is not a JPEG, PNG or WebP picture; save it as one of those.") from None
    stem = slugify(PurePath(upload.name or "").stem)[:80] or "picture"
    return ContentFile(out.getvalue(), name=f"{stem}.{EXTENSIONS[kind]}")
