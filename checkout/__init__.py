"""Orders, the payment saga, refunds, invoices and the outbox: a hold turned into money and back.

The saga (checkout/services.py):
1. `start_payment` extends the hold once and writes the order and a payment in one short
   transaction (a product that ships needs an address first, 409 address_required); the provider's
   hosted session is opened outside it. The order snapshots the gross as amount_minor (what the
   provider charges), tax_minor and tax_rate, the shipping fee and its tax inside them (a CHECK
   keeps the fee within the amount), the discount code and what it took off; net_minor is a
   generated column. A rate changed later does not rewrite a receipt.
2. `POST /checkout/webhooks/<provider>`: the signature (HMAC over a timestamp and the body)
   checked, the body checked to fit its row (no NUL, shallow nesting, an event id of 100
   characters at most; else 400), the event stored once per event id (the same id with another
   body is 409), an authorisation's hold pinned for 15 minutes, the task
   `checkout.process_webhook_event` sent.
3. The task, in one transaction: authorised and still held -> sold, order confirmed, outbox rows
   written; authorised but the hold ended -> order failed, the authorisation marked for voiding;
   declined -> the attempt failed, not the hold (the buyer may try another card while it lasts).
   Why an order failed is stored as a code (checkout/failures.py), said in the reader's language.
4. `settle_payment` captures or voids, idempotently; beat's safety nets (settle_unsettled_payments,
   checkout.sweep) pick up what a lost task left.
5. The outbox (checkout/outbox.py) relays one message per transaction (e-mail, the merchant's
   webhook with an Idempotency-Key, a push), so a crash repeats at most the message in flight.
   Each is rendered in the buyer's language (shop.languages). E-mails (checkout/emails.py) are
   written once as text, the HTML part laid out from it; reminders carry one-click
   List-Unsubscribe.

One charge per payment: every provider POST carries an Idempotency-Key (`floodgate-intent-
<reference>`), and in the database a payment records one session by one conditional UPDATE and an
order has at most one attempt open (checkout_payment_one_open_per_order); a session whose UPDATE
loses is cancelled at once. tests/checkout/test_charged_once.py, with tests/checkout/keyed_replay.py
in front of localstripe (which ignores the header).

Providers (checkout/providers/): an adapter implements `base.PaymentProvider` (create_session,
parse_webhook, capture, void, refund; ProviderError retries, PermanentProviderError stops) and is
named in PROVIDERS; PAYMENT_PROVIDER picks it. Every event is stored as received beside the
adapter's reading (`facts`), and the saga acts on the facts alone. Stripe (providers/stripe.py): a
PaymentIntent with manual capture; the buyer pays on our page /checkout/stripe/<intent> with the
Payment Element, whose CSP additions are checkout/stripe_page.py; 3-D Secure runs there, a failed
challenge is a decline, an abandoned one a hold that ends unpaid (fail_abandoned_orders), a pass
after that is voided. Capture and cancel read the intent first, so a repeat is a success.

Saved cards (checkout/cards.py): a SetupIntent confirmed in the browser; `save_card` keeps the
card only if the intent succeeded on this buyer's customer. The hold page offers "Order with
obligation to pay, card ...", which runs `start_payment` unchanged and confirms with the saved
card (a decline falls back to the normal form). Stripe only; erasure detaches the cards.

Refunds (checkout/refunds.py): written under the order's row lock and counted on the order at
once (a CHECK keeps them within what was paid), so two merchants cannot refund a unit twice; only
a captured payment (409 capture_pending), asked of the provider with the refund's own key, inline
or by the task checkout.send_refund. Succeeded: the units count as refunded on the hold (and go
back on sale if the merchant said so) and the buyer's e-mail goes out; refused: the amount comes
back; pending: the refund.succeeded or refund.failed webhook decides. A full refund returns the
shipping fee; a partial one by units gives back those units' share of the goods. A buyer (or the
shop, with a reason) cancels an order not yet charged (`cancel_order`); `settle_payment` holds the
payment row while it asks the provider, so a cancel waits for a capture in flight.

Disputes (checkout/disputes.py): applied once per provider dispute id, updated only while
undecided and only by a newer event; the merchant's e-mails keyed per dispute; nothing moves units
or money. Fulfilment (checkout/fulfilment.py, carriers.py): shipped with a carrier and tracking
number under the order's lock, one e-mail per number. Support (checkout/support.py): the order list
searched by what a buyer quotes, one admin page per buyer.

Invoices (checkout/invoices.py, invoice_pdf.py): every confirmed order an invoice, every refund
that went through a credit note, in two gapless sequences (InvoiceCounter rows, NEXT_NUMBER taken
last in the confirming transaction; not a SEQUENCE, which skips rolled-back numbers). On the
2-core test machine 240 confirmations from 16 threads ran at 72/s numbered, 130/s not; they run
at the pace buyers pay, off the claim's path. What it says is kept on the row when issued; the
PDF is drawn on demand in the reader's language with reportlab (Helvetica: Latin-1 and the euro
sign). tests/checkout/test_invoice_numbers.py, test_invoices.py.

Reminders (checkout/reminders.py): a row per (drop, buyer), inserted only while the start is ahead;
beat's checkout.send_reminders takes the due ones (SKIP LOCKED) and writes their e-mails' outbox
rows in the same transaction, with the start as an .ics (shop/calendar.py). For a waiting room
they go when the room opens (admission.work.ROOM_OPENS, an hour before). Raffle results
(checkout/raffles.py) are an outbox e-mail per entrant.

Pushes (checkout/push.py, vapid.py): four moments (admitted, a returned unit offered, a raffle
drawn, a reminded drop open), one outbox row each per browser; beat's checkout.announce_turns reads
what admission and the offers did, since they sit below checkout. Without WEB_PUSH_VAPID_KEY there
is no button and the endpoint answers 404 push_off; check --deploy refuses the published dev key.

The exchange's payout (checkout/exchange.py): in the transaction that records the new buyer's
capture, `pay_out_in` moves the unit out of the seller's hold (PAY_OUT) and writes the seller's
refund of price less fee, one per listing.

Services send tasks by name (`current_app.send_task`), so tasks build on services; reads are
selectors.py.
"""
