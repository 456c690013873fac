"""The inference routes the engine chooses between."""
