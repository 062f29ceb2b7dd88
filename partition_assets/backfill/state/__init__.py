"""What a backfill has done, kept beside the Dagster instance: its record, its coordinator's
presence, and the ledger of what it read and wrote."""
