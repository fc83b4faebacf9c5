"""Env adapters, vector envs and the natively batched tasks."""

from interplay.envs import native as native  # registers the natively batched tasks
