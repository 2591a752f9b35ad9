"""Handlers: one module per resource, one function per route and method."""
