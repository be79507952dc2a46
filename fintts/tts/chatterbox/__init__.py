"""Chatterbox Multilingual (Resemble AI, MIT): its T3 fine-tuned for Finnish on fintts's trainer (docs/chatterbox.md)."""
