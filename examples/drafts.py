def load_users(db):
    rows = db.query("users")
    return [dict(row) for row in rows]


def load_groups(db):
    rows = db.query("groups")
    
