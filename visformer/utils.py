"""Device selection and seeding."""

from __future__ import annotations

import random

import numpy as np
import torch


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Map "auto" to CUDA when present, else CPU; pass anything else through."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) for reproducible runs."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
