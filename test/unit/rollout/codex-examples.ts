/** The example lines of reference §1.8, plus the real 0.46-era turn_context line quoted there. */
export const CODEX_EXAMPLE_JSONL = String.raw`{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"019a…","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/repo","originator":"codex_cli_rs","cli_version":"0.150.0","source":"cli","model_provider":"openai","git":{}}}
{"timestamp":"…","type":"event_msg","payload":{"type":"task_started","turn_id":"t1","model_context_window":272000,"collaboration_mode_kind":"default"}}
{"timestamp":"…","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>…</permissions instructions>"}]}}
{"timestamp":"…","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/repo</cwd>\n  <shell>zsh</shell>\n</environment_context>"}]}}
{"timestamp":"…","type":"turn_context","payload":{"turn_id":"t1","cwd":"/repo","approval_policy":"on-request","sandbox_policy":{"mode":"workspace-write","network_access":false,"exclude_tmpdir_env_var":false,"exclude_slash_tmp":false},"model":"gpt-5.4","summary":"auto"}}
{"timestamp":"…","type":"world_state","payload":{"full":true,"state":{"environments":{"environments":{"local":{"cwd":"file:///repo"}}},"permissions":{"enabled":true,"model_slug":"gpt-5.4","instructions_fingerprint":"sha1:…"}}}}
{"timestamp":"…","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]}}
{"timestamp":"…","type":"event_msg","payload":{"type":"user_message","message":"fix the bug","images":null,"local_images":[],"text_elements":[]}}
{"timestamp":"…","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Looking**"}],"content":null,"encrypted_content":"gAAAA…"}}
{"timestamp":"…","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"call_1"}}
{"timestamp":"…","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"a.txt\nb.txt"}}
{"timestamp":"…","type":"response_item","payload":{"type":"custom_tool_call","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch…"}}
{"timestamp":"…","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_2","output":"Success"}}
{"timestamp":"…","type":"response_item","payload":{"type":"local_shell_call","call_id":"call_3","status":"completed","action":{"type":"exec","command":["echo","hi"],"timeout_ms":null,"working_directory":null,"env":null,"user":null}}}
{"timestamp":"…","type":"response_item","payload":{"type":"web_search_call","status":"completed","action":{"type":"search","query":"weather"}}}
{"timestamp":"…","type":"response_item","payload":{"type":"compaction","encrypted_content":"…"}}
{"timestamp":"…","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":20,"reasoning_output_tokens":5,"total_tokens":120},"last_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":20,"reasoning_output_tokens":5,"total_tokens":120},"model_context_window":258400},"rate_limits":null}}
{"timestamp":"…","type":"event_msg","payload":{"type":"task_complete","turn_id":"t1","last_agent_message":"done"}}
{"timestamp":"…","type":"world_state","payload":{"full":false,"state":{"environments":{"environments":{"local":{"cwd":"file:///other"}}}}}}
{"timestamp":"…","type":"compacted","payload":{"message":"summary…","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]}],"window_number":1}}
{"timestamp":"…","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}
{"timestamp":"…","type":"event_msg","payload":{"type":"turn_aborted","turn_id":"t2","reason":"interrupted"}}
{"timestamp":"…","type":"inter_agent_communication","payload":{"author":"/root","recipient":"/root/worker","other_recipients":[],"content":"continue","trigger_turn":true}}
{"timestamp":"…","type":"inter_agent_communication_metadata","payload":{"trigger_turn":false}}
{"timestamp":"2025-10-29T00:59:38.317Z","type":"turn_context","payload":{"cwd":"/repo","approval_policy":"never","sandbox_policy":{"mode":"workspace-write","network_access":false,"exclude_tmpdir_env_var":false,"exclude_slash_tmp":false},"model":"gpt-5-codex","effort":"high","summary":"auto"}}`;
