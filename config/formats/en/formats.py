"""English formats, Django's own but for datetimes, which carry their zone ("T": UTC).

A merchant in another zone must not read the shop's clock as their own: every datetime the
admin shows (lists, read-only fields) and every one a template prints without a format.
"""

DATETIME_FORMAT = "N j, Y, P T"
SHORT_DATETIME_FORMAT = "m/d/Y P T"
