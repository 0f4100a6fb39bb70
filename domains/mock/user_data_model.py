"""Mock user DB (upstream HEAD only): a notification inbox."""

from typing import Dict, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

NotificationStatus = Literal["unread", "read"]


class Notification(BaseModel):
    """One inbox entry."""

    model_config = ConfigDict(extra="forbid")

    notification_id: str = Field(description="Notification id.")
    message: str = Field(description="Text shown to the user.")
    status: NotificationStatus = Field(default="unread", description="unread or read.")
    task_id: Optional[str] = Field(None, description="Related task, if any.")


class MockUserDB(BaseModel):
    """The user's inbox."""

    model_config = ConfigDict(extra="forbid")

    notifications: Dict[str, Notification] = Field(default_factory=dict, description="Notifications by id.")
