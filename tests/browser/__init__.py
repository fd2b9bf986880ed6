"""Tests in headless Chromium (conftest.py: the driver)."""
