"""The gang recovery benchmark's parts (bench/gang_recovery.py): the kinds and modes it runs, the trainers'
`kubetrain-train` lines it reads, one measured run on the real node, and the table."""
