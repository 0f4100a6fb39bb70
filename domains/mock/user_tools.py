"""User tools of the mock domain (present when the data has a user DB: upstream HEAD)."""

from tau2_gym.core.tools import AsModel, Toolkit, ToolType, tool
from tau2_gym.domains.mock.user_data_model import Notification


class MockUserTools(Toolkit):
    """User-side toolkit: an inbox of notifications."""

    @tool(ToolType.READ)
    def check_notifications(self):
        """List the notifications in the inbox."""
        return AsModel(list(self.db.notifications.values()))

    @tool(ToolType.WRITE)
    def dismiss_notification(self, notification_id: str) -> str:
        """Mark a notification as read.

        Args:
            notification_id: Notification to mark.
        """
        if notification_id not in self.db.notifications:
            raise ValueError(f"Notification {notification_id} not found")
        self.db.notifications.mut(notification_id)["status"] = "read"
        return f"Notification {notification_id} dismissed"

    def add_notification(self, notification_id: str, message: str, task_id: str | None = None):
        """Init helper: put a notification in the inbox."""
        note = Notification(notification_id=notification_id, message=message, task_id=task_id).model_dump()
        self.db.notifications[notification_id] = note
        return AsModel(note)

    def assert_notification_status(self, notification_id: str, expected_status: str) -> bool:
        """Env assertion: the notification has the given status."""
        if notification_id not in self.db.notifications:
            raise ValueError(f"Notification {notification_id} not found")
        return self.db.notifications[notification_id]["status"] == expected_status
