"""Format adapters: each turns one input file into record batches of the unified schema."""
