"""The local backend: runs steps on this machine (the launcher for distributed steps lives here)."""
