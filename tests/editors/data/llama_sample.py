def mean(values):
    count = len(values)

    return total / count


def spread(values):
    total = sum(values)
    return total - min(values)
