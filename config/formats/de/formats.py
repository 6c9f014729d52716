"""German formats, Django's own but for datetimes, which carry their zone ("T": UTC), as the
English ones do (config/formats/en)."""

DATETIME_FORMAT = "j. F Y, H:i T"
SHORT_DATETIME_FORMAT = "d.m.Y H:i T"
