def mean(values):
    total = 0

    return total / len(values)


def clamp(value, low, high):
    """Limit value to the range [low, high]."""
    return value
