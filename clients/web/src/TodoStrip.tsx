import type { Session, TodoStatus } from "@agenthost/sdk/web";

const MARKS: Record<TodoStatus, string> = { completed: "✓", in_progress: "▸", pending: "○" };

/** The agent's task list (the `todos` projection) as a strip above the transcript; hidden while it keeps none. */
export function TodoStrip({ session }: { session: Session }) {
  const todos = session.todos;
  if (todos.length === 0) return null;
  const done = todos.filter((todo) => todo.status === "completed").length;
  return (
    <div className="todo-strip" data-testid="todos" data-done={done} data-total={todos.length}>
      <span className="todo-count">
        Tasks {done}/{todos.length}
      </span>
      <ol>
        {todos.map((todo, index) => (
          <li key={index} className={`todo ${todo.status}`} data-testid="todo" data-status={todo.status}>
            <span className="todo-mark">{MARKS[todo.status]}</span> {todo.content}
          </li>
        ))}
      </ol>
    </div>
  );
}
