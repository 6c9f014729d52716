# The base is a build argument: the official image by default; a stand-in made from Debian's
# packages where no registry is reachable (`prove compose`, devtools/compose.py).
ARG BASE=python:3.11-slim
FROM ${BASE}
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
# The dependencies in a layer of their own, keyed on pyproject.toml alone: an edit anywhere else
# (the README the metadata names included, so an empty one stands in) reuses it.
COPY pyproject.toml ./
RUN touch README.md && pip install --no-cache-dir -e . || true
COPY . .
# collectstatic in the production profile, so the manifest the production storage reads exists;
# the values below exist only for this build step (no process of the image sees them).
RUN pip install --no-cache-dir -e . && \
    SECRET_KEY=build-only-never-signs-anything-0123456789-abcdefghijklmnopqrstuvwxyz \
    DATABASE_URL=postgresql://build/build REDIS_URL=redis://build \
    PAYMENT_PROVIDER_SECRET=build PAYMENT_WEBHOOK_SECRET=build PAYMENT_PROVIDER_URL=https://build \
    ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL=1 \
    PUBLIC_BASE_URL=https://build python manage.py collectstatic --no-input -v0
# The folders the app writes to belong to its user: compose mounts volumes on the first two
# (a new volume takes the owner of the folder it is mounted on), and beat's schedule goes to /tmp.
RUN useradd --create-home floodgate && \
    mkdir -p /media /rehearsals && chown floodgate:floodgate /media /rehearsals
USER floodgate
EXPOSE 8000
# granian, one worker process per core (config/web.py).
CMD ["floodgate-web", "--host", "0.0.0.0", "--port", "8000"]
