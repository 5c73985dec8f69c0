class NotTheModel:
    pass
