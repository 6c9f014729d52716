"""The models everything points at, and the rules every layer shares.

Product, Drop (its state and sale window), Variant, ApiToken, Address, ShippingZone,
ShopSettings, LegalText, BuyerLanguage and the rehearsal's RehearsalBuyer. Every table of the
store points at shop_drop, so this is the bottom layer but core.

Why Drop keeps every layer's settings (hold and offer time, buyer limit, stock layout, waiting
room, wave pace, proof-of-work bits, gate): each is a column of the one row every claim statement
and every join already probes by primary key, in the statement that decides (a hold's expiry is
`now() + d.hold_seconds` inside INSERT_HOLD; GIVE_BACK reads `d.waiting_room`), and the merchant
edits them in one form. A table per layer would add a join to each claim and a query to each join
batch, and gain no arrow. They are written in one place, catalogue.services.create_drop (the
admin's add goes through it), and the admin's change form.

Rules in SQL (shop/sql.py), on the database's clock:
- STATE: a drop's state from its sale window and pause.
- ON_SALE: live, or the presale window for a claim admitted by a presale code or list.
- AUDIENCE: who may take part, inside the claim statements themselves (INSERT_HOLD, and a batch's
  INSERT_HOLDS for every buyer in it) and the join's check. A rehearsal's copy is marked
  (`Drop.rehearsal_of`) and so are its made-up buyers (`RehearsalBuyer`, one row per account), so
  no cache in front (the lane's tokens and drops, the edge's snapshots) can let a real buyer claim
  made-up stock or a made-up buyer real stock.

Prices (shop/pricing.py): `line(product, quantity, off=...)` gives net, tax and gross in minor
units from the product's tax_rate (0 <= rate < 100, a CHECK) and PRICES_INCLUDE_TAX; the tax is
rounded half-up once per line, in the currency's minor unit. A discount comes off the line's
total first (a percentage rounded half-up; one minor unit is always left, as every order is a
payment), never off the shipping fee, and the tax is computed on what is left. A buyer pays a
`Total`: the goods' Price and, once the address's zone is known, the fee's own Price at its own
rate, the tax summed per rate. `footer_note` is the footer's sentence over every product's rate.

Shipping (shop/addresses.py, shop/shipping.py): a product that `ships` asks for an address while
its hold is held; `AddressForm` validates it (required fields, lengths, no control characters, a
country of COUNTRIES). Address rows are never edited, so an order's address is a snapshot and the
account's latest row is what its next hold suggests. A product's ShippingZone rows name countries
and a fee per order or per unit, taxed at the zone's rate or the product's. The address's country
picks the zone; a country in two zones of one product is refused when zones are written (the
database cannot state it), and `zone_for` takes the first by id if it ever happened. The model
lives here because the hold page (sale), checkout and the account all read it.

Languages (shop/languages.py): each buyer's last language, one BuyerLanguage row, read by
checkout's relay to write e-mails in it.

The shop's identity (shop/identity.py, shop/setup.py, shop/legal.py). Nothing a buyer reads
names the software: one ShopSettings row (id 1, a CHECK says so) holds the name, logo, accent
colour, legal name, postal address, VAT ID, contact e-mail, support URL and whether prices
include tax. Written by the admin's one Shop page (shop/admin.py; the logo checked by
shop/pictures.py, 1 MB) or the configure_shop command (`setup.configure`, one durable
transaction; every field checked before the logo is written); both end in `setup.save_row`,
which stamps configured_at, writes missing legal pages from their templates and drops the cached
copies after the commit. Read only through `identity.current()`: this process's copy for 5 s,
then Redis (`fg:1:shop:identity`), then the row; with Redis away it reads the row, with the
database away too it keeps the last copy or the defaults (SHOP_NAME, PRICES_INCLUDE_TAX). Its
users: page titles, header, footer, accent colour, e-mails' From name, subject prefix and
signature, the .ics, the payment description and the card statement's words
(`statement_descriptor`: Latin capitals, at most 10 characters, sent to Stripe as
statement_descriptor_suffix). Until it is set the admin index shows a notice and
`check --deploy` warns shop.W001 (shop/checks.py). Legal pages (LegalText: kind x language) are
the merchant's plain text, escaped, at /legal/<kind>/ in the reader's language, else the shop's,
else the template; the hold page links the terms and the withdrawal policy above the "Order with
obligation to pay" button (BGB 312j). tests/storefront/test_shop_identity.py finds no
"Floodgate" in any buyer page, e-mail, .ics or payment description.

shop/calendar.py writes a drop's start as an iCalendar event. shop.settings, shop.asgi and
shop.celery are the public names outside tools start; they re-export config's.
"""
