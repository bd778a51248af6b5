"""Client-side privatizers, one module per method (see ``privaudit list defenses``)."""
