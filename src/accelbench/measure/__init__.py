"""The measurement core: timing statistics (``timing``), warm-up to stability (``stability``) and what a
failed measurement's status is (``failures``). No stage logic and no files here."""
