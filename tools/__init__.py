"""Project tooling that is not loaded from the Hub: prompts, release folders, checkpoint conversion."""
