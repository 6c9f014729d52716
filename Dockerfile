FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
RUN pip install --no-cache-dir -e . || true
COPY . .
RUN pip install --no-cache-dir -e . && \
    FLOODGATE_PROFILE=dev DATABASE_URL=postgresql://x/x REDIS_URL=redis://x python manage.py collectstatic --no-input -v0
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "shop.asgi:application"]
