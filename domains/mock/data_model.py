"""Mock agent DB: tasks and users. Field order and types are the dump (and hash) contract."""

from typing import Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

TaskStatus = Literal["pending", "completed"]


class Task(BaseModel):
    task_id: str = Field(description="Task id.")
    title: str = Field(description="Short title.")
    description: Optional[str] = Field(None, description="Longer text, optional.")
    status: TaskStatus = Field(description="pending or completed.")


class User(BaseModel):
    user_id: str = Field(description="User id.")
    name: str = Field(description="Display name.")
    tasks: List[str] = Field(description="Ids of the user's tasks.")


class MockDB(BaseModel):
    """Tasks and users, keyed by id."""

    model_config = ConfigDict(extra="forbid")

    tasks: Dict[str, Task] = Field(description="Tasks by id.")
    users: Dict[str, User] = Field(description="Users by id.")
