"""The request side: what a person or a system asks to change, checked and written once.

Who may write (`access`: dashboard tokens), who asked and through what (`actors`),
what an answer means for each question kind (`answers`), what one task may hold
(`limits`), and the requests themselves (`inbox`: submit, answer, reopen, retry,
cancel), each landing in the ledger with its command for a coordinator to act on.
"""
