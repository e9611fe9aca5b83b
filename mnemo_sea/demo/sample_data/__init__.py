"""Sample data shipped inside the package, for `mnemo-sea demo` and for trying `mnemo-sea ingest`.

Data only: `mnemo_sea.demo.samples` loads these files, `mnemo_sea.demo.session_script` parses
the session script and `mnemo_sea.demo.tool_outputs` builds its long outputs. This package exists
so that importlib.resources finds the files, from an installed wheel as from the repository
(never from the repository's shared folder).

Everything here is fictional and written for this project: a veterinary clinic's knowledge base
(tenant `clinic`, 伊克塞动物诊疗中心: drug labels, clinic policies, client handouts; Chinese with
a few English documents) and an online shop's order investigation (tenant `shop`: order O-1042,
domestic and cross-border delivery policies, returns, a product page with a price). It is not
medical advice.

- `clinic.jsonl`, `shop.jsonl`: one evidence document per line, in the format of
  `mnemo_sea.system.documents` (`policy:analgesia:cats` appears twice: version 1, then version 2,
  which supersedes it when stored in file order);
- `sessions.json`: the demo's sessions, tool call by tool call (tool, arguments, content,
  policy class, observed_at, and the note an agent would leave when archiving), plus memory
  facts with a user correction. Long outputs are named in the file as a generator of
  `mnemo_sea.demo.tool_outputs` with its arguments; they are deterministic, so an original's
  hash is the same on every run;
- `clinic_citations.jsonl`: one answer with a good citation (a verbatim quote) and a broken one
  (a quote that is not in the document), in the format of `mnemo_sea.system.citations`; its
  `expected` key lists the verdict each citation should get.
"""
