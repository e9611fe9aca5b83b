"""How the system is put together: its settings (MNEMO_* variables), the embedder they name
(the packaged model, or a deterministic one for tests and offline runs), and the data folder's
layout. Below the facade: `Mnemo.open` and `Mnemo.from_settings` compose from these.
"""
