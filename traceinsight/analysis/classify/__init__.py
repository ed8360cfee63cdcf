"""What each kernel is: family, precision and tensor-core use, from its name."""
