def greet(name):
    """Return a greeting for name."""
    


print(greet("world"))
