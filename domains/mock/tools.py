"""Agent tools of the mock domain (upstream order: create_task, get_users, update_task_status, transfer)."""

from tau2_gym.core.tools import AsModel, Toolkit, ToolType, tool
from tau2_gym.domains.mock.data_model import Task, TaskStatus


class MockTools(Toolkit):
    """Agent toolkit; the class name appears in argument errors, as upstream's does."""

    @tool(ToolType.WRITE)
    def create_task(self, user_id: str, title: str, description: str = None):  # ty: ignore[invalid-parameter-default] - upstream's signature, read into the tool schema
        """Add a task for a user.

        Args:
            user_id: Owner of the new task.
            title: Task title.
            description: Optional longer text.
        """
        db = self.db
        if user_id not in db.users:
            raise ValueError(f"User {user_id} not found")
        task_id = f"task_{len(db.tasks) + 1}"
        task = Task(task_id=task_id, title=title, description=description, status="pending").model_dump()
        db.tasks[task_id] = task
        db.users.mut(user_id)["tasks"].append(task_id)
        return AsModel(task)

    @tool(ToolType.READ)
    def get_users(self):
        """List every user."""
        return AsModel(list(self.db.users.values()))

    @tool(ToolType.WRITE)
    def update_task_status(self, task_id: str, status: TaskStatus):
        """Set a task's status.

        Args:
            task_id: Task to change.
            status: New status.
        """
        if task_id not in self.db.tasks:
            raise ValueError(f"Task {task_id} not found")
        task = self.db.tasks.mut(task_id)
        task["status"] = status
        return AsModel(task)

    def assert_number_of_tasks(self, user_id: str, expected_number: int) -> bool:
        """Env assertion: the user has ``expected_number`` tasks."""
        if user_id not in self.db.users:
            raise ValueError(f"User {user_id} not found")
        return len(self.db.users[user_id]["tasks"]) == expected_number

    def assert_task_status(self, task_id: str, expected_status: TaskStatus) -> bool:
        """Env assertion: the task has the given status."""
        if task_id not in self.db.tasks:
            raise ValueError(f"Task {task_id} not found")
        return self.db.tasks[task_id]["status"] == expected_status

    @tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:  # noqa: ARG002 - upstream's tool signature
        """Hand the conversation to a human agent.

        Args:
            summary: What the user needs.
        """
        return "Transfer successful"
