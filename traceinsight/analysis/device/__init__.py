"""What the device can do: peak FLOP/s per precision, memory bandwidth, which part a trace ran on."""
