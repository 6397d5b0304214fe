package messages

// Type returns TypeSessionCreated.
func (*SessionCreated) Type() string { return TypeSessionCreated }

// Session returns the Session the event belongs to.
func (p *SessionCreated) Session() SessionID { return p.SessionID }

// Type returns TypeAgentSelected.
func (*AgentSelected) Type() string { return TypeAgentSelected }

// Session returns the Session the event belongs to.
func (p *AgentSelected) Session() SessionID { return p.SessionID }

// Type returns TypeModelSelected.
func (*ModelSelected) Type() string { return TypeModelSelected }

// Session returns the Session the event belongs to.
func (p *ModelSelected) Session() SessionID { return p.SessionID }

// Type returns TypeSessionMoved.
func (*SessionMoved) Type() string { return TypeSessionMoved }

// Session returns the Session the event belongs to.
func (p *SessionMoved) Session() SessionID { return p.SessionID }

// Type returns TypePromptAdmitted.
func (*PromptAdmitted) Type() string { return TypePromptAdmitted }

// Session returns the Session the event belongs to.
func (p *PromptAdmitted) Session() SessionID { return p.SessionID }

// Type returns TypePromptPromoted.
func (*PromptPromoted) Type() string { return TypePromptPromoted }

// Session returns the Session the event belongs to.
func (p *PromptPromoted) Session() SessionID { return p.SessionID }

// Type returns TypeCompactionAdmitted.
func (*CompactionAdmitted) Type() string { return TypeCompactionAdmitted }

// Session returns the Session the event belongs to.
func (p *CompactionAdmitted) Session() SessionID { return p.SessionID }

// Type returns TypeCompactionStarted.
func (*CompactionStarted) Type() string { return TypeCompactionStarted }

// Session returns the Session the event belongs to.
func (p *CompactionStarted) Session() SessionID { return p.SessionID }

// Type returns TypeCompactionEnded.
func (*CompactionEnded) Type() string { return TypeCompactionEnded }

// Session returns the Session the event belongs to.
func (p *CompactionEnded) Session() SessionID { return p.SessionID }

// Type returns TypeCompactionFailed.
func (*CompactionFailed) Type() string { return TypeCompactionFailed }

// Session returns the Session the event belongs to.
func (p *CompactionFailed) Session() SessionID { return p.SessionID }

// Type returns TypeInstructionsBaselined.
func (*InstructionsBaselined) Type() string { return TypeInstructionsBaselined }

// Session returns the Session the event belongs to.
func (p *InstructionsBaselined) Session() SessionID { return p.SessionID }

// Type returns TypeInstructionsUpdated.
func (*InstructionsUpdated) Type() string { return TypeInstructionsUpdated }

// Session returns the Session the event belongs to.
func (p *InstructionsUpdated) Session() SessionID { return p.SessionID }

// Type returns TypeExecutionStarted.
func (*ExecutionStarted) Type() string { return TypeExecutionStarted }

// Session returns the Session the event belongs to.
func (p *ExecutionStarted) Session() SessionID { return p.SessionID }

// Type returns TypeExecutionSucceeded.
func (*ExecutionSucceeded) Type() string { return TypeExecutionSucceeded }

// Session returns the Session the event belongs to.
func (p *ExecutionSucceeded) Session() SessionID { return p.SessionID }

// Type returns TypeExecutionFailed.
func (*ExecutionFailed) Type() string { return TypeExecutionFailed }

// Session returns the Session the event belongs to.
func (p *ExecutionFailed) Session() SessionID { return p.SessionID }

// Type returns TypeExecutionInterrupted.
func (*ExecutionInterrupted) Type() string { return TypeExecutionInterrupted }

// Session returns the Session the event belongs to.
func (p *ExecutionInterrupted) Session() SessionID { return p.SessionID }

// Type returns TypeStepStarted.
func (*StepStarted) Type() string { return TypeStepStarted }

// Session returns the Session the event belongs to.
func (p *StepStarted) Session() SessionID { return p.SessionID }

// Type returns TypeStepEnded.
func (*StepEnded) Type() string { return TypeStepEnded }

// Session returns the Session the event belongs to.
func (p *StepEnded) Session() SessionID { return p.SessionID }

// Type returns TypeStepFailed.
func (*StepFailed) Type() string { return TypeStepFailed }

// Session returns the Session the event belongs to.
func (p *StepFailed) Session() SessionID { return p.SessionID }

// Type returns TypeTextStarted.
func (*TextStarted) Type() string { return TypeTextStarted }

// Session returns the Session the event belongs to.
func (p *TextStarted) Session() SessionID { return p.SessionID }

// Type returns TypeTextEnded.
func (*TextEnded) Type() string { return TypeTextEnded }

// Session returns the Session the event belongs to.
func (p *TextEnded) Session() SessionID { return p.SessionID }

// Type returns TypeReasoningStarted.
func (*ReasoningStarted) Type() string { return TypeReasoningStarted }

// Session returns the Session the event belongs to.
func (p *ReasoningStarted) Session() SessionID { return p.SessionID }

// Type returns TypeReasoningEnded.
func (*ReasoningEnded) Type() string { return TypeReasoningEnded }

// Session returns the Session the event belongs to.
func (p *ReasoningEnded) Session() SessionID { return p.SessionID }

// Type returns TypeToolInputStarted.
func (*ToolInputStarted) Type() string { return TypeToolInputStarted }

// Session returns the Session the event belongs to.
func (p *ToolInputStarted) Session() SessionID { return p.SessionID }

// Type returns TypeToolInputEnded.
func (*ToolInputEnded) Type() string { return TypeToolInputEnded }

// Session returns the Session the event belongs to.
func (p *ToolInputEnded) Session() SessionID { return p.SessionID }

// Type returns TypeToolCalled.
func (*ToolCalled) Type() string { return TypeToolCalled }

// Session returns the Session the event belongs to.
func (p *ToolCalled) Session() SessionID { return p.SessionID }

// Type returns TypeToolSucceeded.
func (*ToolSucceeded) Type() string { return TypeToolSucceeded }

// Session returns the Session the event belongs to.
func (p *ToolSucceeded) Session() SessionID { return p.SessionID }

// Type returns TypeToolFailed.
func (*ToolFailed) Type() string { return TypeToolFailed }

// Session returns the Session the event belongs to.
func (p *ToolFailed) Session() SessionID { return p.SessionID }

// Type returns TypeRetryScheduled.
func (*RetryScheduled) Type() string { return TypeRetryScheduled }

// Session returns the Session the event belongs to.
func (p *RetryScheduled) Session() SessionID { return p.SessionID }

// Type returns TypeTextDelta.
func (*TextDelta) Type() string { return TypeTextDelta }

// Session returns the Session the event belongs to.
func (p *TextDelta) Session() SessionID { return p.SessionID }

// Type returns TypeReasoningDelta.
func (*ReasoningDelta) Type() string { return TypeReasoningDelta }

// Session returns the Session the event belongs to.
func (p *ReasoningDelta) Session() SessionID { return p.SessionID }

// Type returns TypeToolInputDelta.
func (*ToolInputDelta) Type() string { return TypeToolInputDelta }

// Session returns the Session the event belongs to.
func (p *ToolInputDelta) Session() SessionID { return p.SessionID }

// Type returns TypeCompactionDelta.
func (*CompactionDelta) Type() string { return TypeCompactionDelta }

// Session returns the Session the event belongs to.
func (p *CompactionDelta) Session() SessionID { return p.SessionID }

// Type returns TypeUsageUpdated.
func (*UsageUpdated) Type() string { return TypeUsageUpdated }

// Session returns the Session the event belongs to.
func (p *UsageUpdated) Session() SessionID { return p.SessionID }

// Type returns TypePermissionAsked.
func (*PermissionAsked) Type() string { return TypePermissionAsked }

// Session returns the Session the event belongs to.
func (p *PermissionAsked) Session() SessionID { return p.SessionID }

// Type returns TypePermissionReplied.
func (*PermissionReplied) Type() string { return TypePermissionReplied }

// Session returns the Session the event belongs to.
func (p *PermissionReplied) Session() SessionID { return p.SessionID }

// durable holds a constructor for every durable payload type.
var durable = map[string]func() Payload{
	TypeSessionCreated:        func() Payload { return new(SessionCreated) },
	TypeAgentSelected:         func() Payload { return new(AgentSelected) },
	TypeModelSelected:         func() Payload { return new(ModelSelected) },
	TypeSessionMoved:          func() Payload { return new(SessionMoved) },
	TypePromptAdmitted:        func() Payload { return new(PromptAdmitted) },
	TypePromptPromoted:        func() Payload { return new(PromptPromoted) },
	TypeCompactionAdmitted:    func() Payload { return new(CompactionAdmitted) },
	TypeCompactionStarted:     func() Payload { return new(CompactionStarted) },
	TypeCompactionEnded:       func() Payload { return new(CompactionEnded) },
	TypeCompactionFailed:      func() Payload { return new(CompactionFailed) },
	TypeInstructionsBaselined: func() Payload { return new(InstructionsBaselined) },
	TypeInstructionsUpdated:   func() Payload { return new(InstructionsUpdated) },
	TypeExecutionStarted:      func() Payload { return new(ExecutionStarted) },
	TypeExecutionSucceeded:    func() Payload { return new(ExecutionSucceeded) },
	TypeExecutionFailed:       func() Payload { return new(ExecutionFailed) },
	TypeExecutionInterrupted:  func() Payload { return new(ExecutionInterrupted) },
	TypeStepStarted:           func() Payload { return new(StepStarted) },
	TypeStepEnded:             func() Payload { return new(StepEnded) },
	TypeStepFailed:            func() Payload { return new(StepFailed) },
	TypeTextStarted:           func() Payload { return new(TextStarted) },
	TypeTextEnded:             func() Payload { return new(TextEnded) },
	TypeReasoningStarted:      func() Payload { return new(ReasoningStarted) },
	TypeReasoningEnded:        func() Payload { return new(ReasoningEnded) },
	TypeToolInputStarted:      func() Payload { return new(ToolInputStarted) },
	TypeToolInputEnded:        func() Payload { return new(ToolInputEnded) },
	TypeToolCalled:            func() Payload { return new(ToolCalled) },
	TypeToolSucceeded:         func() Payload { return new(ToolSucceeded) },
	TypeToolFailed:            func() Payload { return new(ToolFailed) },
	TypeRetryScheduled:        func() Payload { return new(RetryScheduled) },
}

// live holds a constructor for every live-only payload type.
var live = map[string]func() Payload{
	TypeTextDelta:         func() Payload { return new(TextDelta) },
	TypeReasoningDelta:    func() Payload { return new(ReasoningDelta) },
	TypeToolInputDelta:    func() Payload { return new(ToolInputDelta) },
	TypeCompactionDelta:   func() Payload { return new(CompactionDelta) },
	TypeUsageUpdated:      func() Payload { return new(UsageUpdated) },
	TypePermissionAsked:   func() Payload { return new(PermissionAsked) },
	TypePermissionReplied: func() Payload { return new(PermissionReplied) },
}
