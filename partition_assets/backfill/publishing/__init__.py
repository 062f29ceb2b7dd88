"""What a staged backfill does around its node runs: the tables it writes, leases and
freeze, the validation gate and its statistics, publish, discard and rollback, pinned
inputs and the notification hook."""
