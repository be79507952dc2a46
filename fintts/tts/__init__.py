"""Finnish text-to-speech task: corpus, text, audio features, VITS training, voice."""
