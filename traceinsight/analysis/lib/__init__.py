"""Building blocks several analyses share: interval algebra, statistics, the timeline, host-event names."""
