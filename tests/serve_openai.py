"""The openai Python client against `tessera serve` (run by tests/serve_api.sh).

usage: serve_openai.py BASE_URL MODEL PROMPT WANT -- WANT is `tessera run`'s greedy reply.
"""
import sys

import openai

base, model, prompt, want = sys.argv[1:5]
client = openai.OpenAI(base_url=base, api_key="unused")

r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                   temperature=0, max_tokens=40)
assert r.choices[0].message.content == want, (r.choices[0].message.content, want)
assert r.usage.completion_tokens > 0
print("openai: completion:", repr(r.choices[0].message.content), "usage", r.usage.prompt_tokens, r.usage.completion_tokens)

pieces = []
for chunk in client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                            temperature=0, max_tokens=40, stream=True):
    if chunk.choices and chunk.choices[0].delta.content:
        pieces.append(chunk.choices[0].delta.content)
assert "".join(pieces) == want, ("".join(pieces), want)
print("openai: stream of", len(pieces), "pieces:", pieces[:6], "...")

try:
    client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    raise SystemExit("an unknown model was accepted")
except openai.NotFoundError as e:
    print("openai: unknown model ->", e.status_code, e.body["message"] if isinstance(e.body, dict) else e.body)
