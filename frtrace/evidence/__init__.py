"""Evidence besides the dumps: the job's logs and py-spy stacks, read as typed records."""
