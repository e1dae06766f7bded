-- An admission is recorded, and so is a refusal in Penalty mode (a client that keeps
-- knocking keeps its window full); a Peek records nothing.
local recorded = mode == 1 or (allowed and mode == 0)
