"""Helpers shared by several test files: checkpoints to test on, AppTest and Chromium drivers (fixtures: conftest)."""
