"""Storage the loop owns and the returns computed over it."""
